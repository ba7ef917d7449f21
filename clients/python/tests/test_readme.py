"""The README's example, run as written: extracted from README.md, served
by uvicorn, sent twice with one key."""
import os
import re

import httpx

from servers import Server

HERE = os.path.dirname(os.path.abspath(__file__))


def readme_example():
    with open(os.path.join(HERE, "..", "README.md")) as readme:
        text = readme.read()
    section = text.split("## Five lines", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_as_written(app_dsn, admin, unique, tmp_path):
    source = readme_example()
    assert source.count("\n") >= 5 and "IdempotencyMiddleware" in source
    path = tmp_path / "app.py"
    path.write_text(source)
    key = f"readme-{unique}"
    item = f"book {unique}"
    with Server(f"{path}:app", {"DATABASE_URL": app_dsn}) as server:
        answers = [httpx.post(server.url + "/orders", json={"item": item},
                              headers={"Idempotency-Key": key}, timeout=30)
                   for _ in range(2)]
        missing = httpx.post(server.url + "/orders", json={"item": item}, timeout=30)
    first, again = answers
    assert first.status_code == 201 and first.json() == {"ordered": item}
    assert "idempotent-replayed" not in first.headers
    assert again.status_code == 201 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert missing.status_code == 400
    assert admin.execute("SELECT count(*) FROM public.orders WHERE item = %s",
                         [item]).fetchone()[0] == 1
