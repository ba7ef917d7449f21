// The request fingerprint: RFC 8785 (JSON Canonicalization Scheme) of the
// body, then SHA-256 as lowercase hex -- the same text idem.request_hash(jsonb)
// computes in the server, so a fingerprint made here and one made there for
// the same document are equal.
'use strict';
const { createHash } = require('node:crypto');

class FingerprintError extends Error {
  constructor(message, code) {
    super(message);
    this.name = 'FingerprintError';
    this.code = code; // the SQLSTATE idem gives for the same input
  }
}

// JCS: objects with members sorted by their names' UTF-16 code units (what
// Array.prototype.sort does on strings), strings as JSON.stringify writes
// them, numbers in ECMAScript's Number::toString form (String(n); -0 is "0").
function canonicalize(value) {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean': return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new FingerprintError('JSON has no NaN or Infinity', 'P4005');
      return String(value);
    case 'string':
      if (!value.isWellFormed()) {
        throw new FingerprintError('a string holds a lone UTF-16 surrogate, which has no UTF-8 form', '22P02');
      }
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map(canonicalize).join(',')}]`;
      const names = Object.keys(value).sort();
      for (const name of names) {
        if (!name.isWellFormed()) {
          throw new FingerprintError('a member name holds a lone UTF-16 surrogate', '22P02');
        }
      }
      return `{${names.map((n) => `${JSON.stringify(n)}:${canonicalize(value[n])}`).join(',')}}`;
    }
    default:
      throw new FingerprintError(`${typeof value} is not JSON`, '22P02');
  }
}

// A decimal literal as sign, significant digits (no leading or trailing
// zeros) and the exponent of its last digit, so two literals compare by value.
function decimalParts(literal) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  let digits = m[2] + (m[3] || '');
  let exponent = Number(m[4] || 0) - (m[3] || '').length;
  digits = digits.replace(/^0+/, '');
  if (digits === '') return '0';
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  return `${m[1]}${digits}e${exponent}`;
}

// JSON.parse rounds every number to a double; idem refuses a number whose
// double, written back, is another value (P4005), so two different amounts
// never share a fingerprint. Walks the text's number tokens outside strings.
function checkNumbers(text) {
  const token = /"(?:[^"\\]|\\.)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
  for (const [literal] of text.matchAll(token)) {
    if (literal[0] === '"') continue;
    const written = String(Number(literal));
    if (!Number.isFinite(Number(literal)) || decimalParts(written) !== decimalParts(literal)) {
      throw new FingerprintError(
        `the number ${literal.length > 40 ? `${literal.slice(0, 40)}...` : literal} cannot be canonicalized exactly (it would read as ${written}); send it as a string`,
        'P4005');
    }
  }
}

// The canonical text of a JSON document given as text (or a Buffer of UTF-8).
function canonicalText(body) {
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : body;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new FingerprintError(`the body is not JSON: ${error.message}`, '22P02');
  }
  checkNumbers(text);
  return canonicalize(value);
}

function sha256Hex(text) {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

// requestHash(text or Buffer): the body's fingerprint, as idem.request_hash($1::jsonb).
function requestHash(body) {
  return sha256Hex(canonicalText(body));
}

// valueHash(value): the fingerprint of an already parsed value (its numbers
// are doubles already, so nothing is left to check).
function valueHash(value) {
  return sha256Hex(canonicalize(value));
}

module.exports = { canonicalize, canonicalText, requestHash, valueHash, FingerprintError };
