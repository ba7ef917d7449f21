#!/usr/bin/env python3
"""Checks META.json against the PGXN Meta Spec 1.0.0 (https://pgxn.org/meta/spec.txt).

The rules are those of the spec's JSON schemas (pgxn/meta, schema/v1): the
required keys, the type and form of every key the spec defines, no key
outside the spec unless it starts with x_ or X_. Written out by hand, with
the standard library only, so that it runs wherever python3 does.

With --tree (the default when run from the repository) it also checks the
distribution against the tree: every file it names exists, the extension's
version is the distribution's, and idem.control's default_version is that
version's major.minor.

    scripts/check_meta_json.py [--spec-only] [META.json]
    scripts/check_meta_json.py --self-test

Prints one line per problem and "META.json: N problems"; exits 1 on any.
"""
import json
import os
import re
import sys

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
# A version range: [op] version, AND-ed with commas; or 0.
RANGE_PART = re.compile(r"^(?:(?:[=!]=|[<>]=?)\s*)?(.+)$")
LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
    "restricted", "unrestricted", "unknown",
}
TOP_KEYS = {"name", "version", "abstract", "maintainer", "license", "provides",
            "meta-spec", "description", "generated_by", "tags", "no_index",
            "prereqs", "release_status", "resources"}
REQUIRED = ["name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"]
PHASES = {"configure", "build", "test", "runtime", "develop"}
RELATIONSHIPS = {"requires", "recommends", "suggests", "conflicts"}
META_SPEC_URLS = {"https://pgxn.org/meta/spec.txt", "http://pgxn.org/meta/spec.txt"}
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def is_custom(key):
    return len(key) > 2 and key[:2] in ("x_", "X_")


def has_control(text):
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


class Checker:
    def __init__(self):
        self.problems = []

    def fail(self, where, what):
        self.problems.append(f"{where}: {what}")

    def string(self, where, value, min_length=1):
        if not isinstance(value, str):
            self.fail(where, f"must be a string, not {type(value).__name__}")
            return False
        if len(value) < min_length:
            self.fail(where, f"must have at least {min_length} character(s)")
            return False
        return True

    def term(self, where, value):
        if not self.string(where, value, 2):
            return
        if re.search(r"[/\\\s]", value) or has_control(value):
            self.fail(where, "a term may not contain '/', '\\', white space or control characters")

    def tag(self, where, value):
        if not self.string(where, value, 2):
            return
        if len(value) > 255:
            self.fail(where, "a tag must be shorter than 256 characters")
        if re.search(r"[/\\]", value) or has_control(value):
            self.fail(where, "a tag may not contain '/', '\\' or control characters")

    def version(self, where, value):
        if self.string(where, value) and not SEMVER.match(value):
            self.fail(where, f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH)")

    def version_range(self, where, value):
        if value == 0 or value == "0":
            return
        if not isinstance(value, str):
            self.fail(where, "a version range must be a string or 0")
            return
        for part in value.split(","):
            match = RANGE_PART.match(part.strip())
            if not match or not SEMVER.match(match.group(1).strip()):
                self.fail(where, f"{part.strip()!r} is not [operator] semantic version")

    def path(self, where, value):
        if not self.string(where, value, 2):
            return
        if value.startswith("/") or "\\" in value or ".." in value.split("/"):
            self.fail(where, "must be a relative path in unix form inside the distribution")

    def uri(self, where, value):
        if self.string(where, value) and not URI.match(value):
            self.fail(where, f"{value!r} is not a URI")

    def email(self, where, value):
        if self.string(where, value) and not EMAIL.match(value):
            self.fail(where, f"{value!r} is not an e-mail address")

    def obj(self, where, value, keys, required=(), min_properties=0):
        """An object with the given keys (plus x_ custom keys); returns it or None."""
        if not isinstance(value, dict):
            self.fail(where, f"must be an object, not {type(value).__name__}")
            return None
        for key in value:
            if key not in keys and not is_custom(key):
                self.fail(where, f"unknown key {key!r} (custom keys start with x_)")
        for key in required:
            if key not in value:
                self.fail(where, f"missing required key {key!r}")
        if len(value) < min_properties:
            self.fail(where, f"must have at least {min_properties} key(s)")
        return value

    def check(self, meta):
        top = self.obj("META.json", meta, TOP_KEYS, REQUIRED)
        if top is None:
            return
        if "name" in top:
            self.term("name", top["name"])
        # Each top-level key that is present, checked by the rule for its kind.
        checks = {
            "version": lambda value: self.version("version", value),
            "abstract": lambda value: self.string("abstract", value),
            "description": lambda value: self.string("description", value),
            "generated_by": lambda value: self.string("generated_by", value),
            "maintainer": self.maintainer,
            "license": self.license,
            "provides": self.provides,
            "meta-spec": self.meta_spec,
            "tags": self.tags,
            "no_index": self.no_index,
            "prereqs": self.prereqs,
            "release_status": self.release_status,
            "resources": self.resources,
        }
        for key, check in checks.items():
            if key in top:
                check(top[key])

    def release_status(self, value):
        if value not in ("stable", "testing", "unstable"):
            self.fail("release_status", "must be one of stable, testing, unstable")

    def maintainer(self, value):
        if isinstance(value, list):
            if not value:
                self.fail("maintainer", "a list must name at least one maintainer")
            for i, item in enumerate(value):
                self.string(f"maintainer[{i}]", item)
        else:
            self.string("maintainer", value)

    def license(self, value):
        if isinstance(value, str):
            if value not in LICENSES:
                self.fail("license", f"{value!r} is not a license the spec names")
        elif isinstance(value, list):
            if not value:
                self.fail("license", "a list must name at least one license")
            for i, item in enumerate(value):
                if item not in LICENSES:
                    self.fail(f"license[{i}]", f"{item!r} is not a license the spec names")
        elif isinstance(value, dict):
            if not value:
                self.fail("license", "an object must name at least one license")
            for name, link in value.items():
                self.uri(f"license.{name}", link)
        else:
            self.fail("license", "must be a string, a list or an object")

    def provides(self, value):
        provides = self.obj("provides", value, set(value) if isinstance(value, dict) else set(),
                            min_properties=1)
        for name, extension in (provides or {}).items():
            where = f"provides.{name}"
            self.term(where, name)
            ext = self.obj(where, extension, {"file", "version", "abstract", "docfile", "docpath"},
                           ("file", "version"))
            if ext is None:
                continue
            if "file" in ext:
                self.path(f"{where}.file", ext["file"])
            if "version" in ext:
                self.version(f"{where}.version", ext["version"])
            if "abstract" in ext:
                self.string(f"{where}.abstract", ext["abstract"])
            if "docfile" in ext:
                self.path(f"{where}.docfile", ext["docfile"])
            if "docpath" in ext:
                self.string(f"{where}.docpath", ext["docpath"])

    def meta_spec(self, value):
        spec = self.obj("meta-spec", value, {"version", "url"}, ("version",))
        if spec is None:
            return
        if "version" in spec and self.string("meta-spec.version", spec["version"]):
            if not re.match(r"^1\.0\.\d+$", spec["version"]):
                self.fail("meta-spec.version", "this checker knows the 1.0.x spec only")
        if "url" in spec and spec["url"] not in META_SPEC_URLS:
            self.fail("meta-spec.url", "must be https://pgxn.org/meta/spec.txt")

    def tags(self, value):
        if not isinstance(value, list) or not value:
            self.fail("tags", "must be a non-empty list")
            return
        for i, tag in enumerate(value):
            self.tag(f"tags[{i}]", tag)

    def no_index(self, value):
        no_index = self.obj("no_index", value, {"file", "directory"})
        if no_index is None:
            return
        if "file" not in no_index and "directory" not in no_index:
            self.fail("no_index", "must have file or directory")
        for key in ("file", "directory"):
            if key not in no_index:
                continue
            paths = no_index[key]
            if isinstance(paths, list):
                if not paths:
                    self.fail(f"no_index.{key}", "a list must not be empty")
                if len(set(map(str, paths))) != len(paths):
                    self.fail(f"no_index.{key}", "paths must be unique")
                for i, item in enumerate(paths):
                    self.path(f"no_index.{key}[{i}]", item)
            else:
                self.path(f"no_index.{key}", paths)

    def prereqs(self, value):
        prereqs = self.obj("prereqs", value, PHASES, min_properties=1)
        for phase, relations in (prereqs or {}).items():
            if is_custom(phase):
                continue
            rels = self.obj(f"prereqs.{phase}", relations, RELATIONSHIPS, min_properties=1)
            for relation, required in (rels or {}).items():
                if is_custom(relation):
                    continue
                where = f"prereqs.{phase}.{relation}"
                names = self.obj(where, required, set(required) if isinstance(required, dict) else set(),
                                 min_properties=1)
                for name, version_range in (names or {}).items():
                    self.term(f"{where}.{name}", name)
                    self.version_range(f"{where}.{name}", version_range)

    def resources(self, value):
        resources = self.obj("resources", value, {"homepage", "bugtracker", "repository"},
                             min_properties=1)
        if resources is None:
            return
        if "homepage" in resources:
            self.uri("resources.homepage", resources["homepage"])
        if "bugtracker" in resources:
            tracker = self.obj("resources.bugtracker", resources["bugtracker"], {"web", "mailto"})
            if tracker is not None:
                if "web" not in tracker and "mailto" not in tracker:
                    self.fail("resources.bugtracker", "must have web or mailto")
                if "web" in tracker:
                    self.uri("resources.bugtracker.web", tracker["web"])
                if "mailto" in tracker:
                    self.email("resources.bugtracker.mailto", tracker["mailto"])
        if "repository" in resources:
            repo = self.obj("resources.repository", resources["repository"], {"url", "web", "type"})
            if repo is not None:
                if "web" not in repo and not ("url" in repo and "type" in repo):
                    self.fail("resources.repository", "must have web, or url and type")
                for key in ("url", "web"):
                    if key in repo:
                        self.uri(f"resources.repository.{key}", repo[key])
                if "type" in repo and self.string("resources.repository.type", repo["type"]):
                    if repo["type"] != repo["type"].lower():
                        self.fail("resources.repository.type", "must be lowercase (git, hg, ...)")

    def check_tree(self, meta, root):
        """The distribution against the files beside META.json."""
        if not isinstance(meta, dict):
            return
        provides = meta.get("provides") if isinstance(meta.get("provides"), dict) else {}
        for name, ext in provides.items():
            if not isinstance(ext, dict):
                continue
            for key in ("file", "docfile"):
                if isinstance(ext.get(key), str) and not os.path.isfile(os.path.join(root, ext[key])):
                    self.fail(f"provides.{name}.{key}", f"{ext[key]} does not exist")
            if ext.get("version") != meta.get("version"):
                self.fail(f"provides.{name}.version", "differs from the distribution's version")
            control = os.path.join(root, f"{name}.control")
            if os.path.isfile(control) and isinstance(ext.get("version"), str):
                with open(control, encoding="utf-8") as f:
                    found = re.search(r"^\s*default_version\s*=\s*'([^']*)'", f.read(), re.M)
                major_minor = ".".join(ext["version"].split(".")[:2])
                if not found:
                    self.fail(f"{name}.control", "has no default_version")
                elif found.group(1) != major_minor:
                    self.fail(f"{name}.control",
                              f"default_version '{found.group(1)}' is not {major_minor} "
                              f"(provides.{name}.version {ext['version']})")


def load(path):
    """Parses JSON, refusing duplicate keys (the spec's objects are maps)."""
    def no_duplicates(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen[key] = value
        return seen
    with open(path, encoding="utf-8") as f:
        return json.load(f, object_pairs_hook=no_duplicates)


def self_test():
    """The checker must fail on broken documents and pass a minimal one."""
    minimal = {"name": "pair", "abstract": "A key/value pair data type", "version": "0.1.8",
               "maintainer": "theory <theory@pgxn.org>", "license": "postgresql",
               "provides": {"pair": {"file": "sql/pair.sql", "version": "0.1.8"}},
               "meta-spec": {"version": "1.0.0"}}
    broken = [
        ({k: v for k, v in minimal.items() if k != "provides"}, "missing required key 'provides'"),
        (dict(minimal, version="1.1"), "not a semantic version"),
        (dict(minimal, license="PostgreSQL"), "not a license the spec names"),
        (dict(minimal, name="a b"), "a term may not contain"),
        (dict(minimal, provides={"pair": {"file": "sql/pair.sql"}}), "missing required key 'version'"),
        (dict(minimal, **{"meta-spec": {"version": "2.0.0"}}), "1.0.x spec only"),
        (dict(minimal, release_status="beta"), "must be one of"),
        (dict(minimal, prereqs={"runtime": {"requires": {"PostgreSQL": ">= 15"}}}), "semantic version"),
        (dict(minimal, resources={}), "at least 1 key"),
        (dict(minimal, homepage="https://example.org"), "unknown key 'homepage'"),
        (dict(minimal, tags=[]), "non-empty list"),
    ]
    failures = 0
    checker = Checker()
    checker.check(minimal)
    if checker.problems:
        print("self-test: the minimal document was refused:", checker.problems)
        failures += 1
    for document, expected in broken:
        checker = Checker()
        checker.check(document)
        if not any(expected in p for p in checker.problems):
            print(f"self-test: expected a problem containing {expected!r}, got {checker.problems}")
            failures += 1
    print(f"check_meta_json self-test: {len(broken) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    flags = {a for a in argv if a.startswith("--")}
    if flags - {"--spec-only", "--self-test"} or len(args) > 1:
        print("usage: scripts/check_meta_json.py [--spec-only] [META.json] | --self-test",
              file=sys.stderr)
        return 2
    if "--self-test" in flags:
        return self_test()
    path = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "META.json")
    checker = Checker()
    try:
        meta = load(path)
    except (OSError, ValueError) as error:
        print(f"{path}: {error}")
        return 1
    checker.check(meta)
    if "--spec-only" not in flags:
        checker.check_tree(meta, os.path.dirname(os.path.abspath(path)))
    for problem in checker.problems:
        print(problem)
    print(f"META.json: {len(checker.problems)} problems")
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
