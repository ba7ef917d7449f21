'use strict';
// The Express middleware and the fingerprint; the Powertools persistence
// layer is '@idem/postgres/powertools' (it needs @aws-lambda-powertools/idempotency).
const { idempotency } = require('./express');
const { requestHash, valueHash, canonicalize, canonicalText, FingerprintError } = require('./jcs');

module.exports = { idempotency, requestHash, valueHash, canonicalize, canonicalText, FingerprintError };
