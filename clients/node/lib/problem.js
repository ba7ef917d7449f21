// SQLSTATEs to HTTP statuses (idem's README, "Mapping to HTTP") and the
// problem-details bodies (RFC 9457) the middleware answers with.
'use strict';

const STATUS_OF_SQLSTATE = {
  P4000: 400, // scope missing
  P4001: 400, // key missing, empty or longer than 255 characters
  P4003: 400, // request hash missing
  P4005: 400, // a number that cannot be fingerprinted exactly
  '22P02': 400, // the body is not JSON
  P4002: 422, // the key was used for another request
  P4012: 409, // a retry took the key over
};

const TITLES = {
  400: 'Bad Request',
  409: 'Conflict',
  422: 'Unprocessable Content',
  500: 'Internal Server Error',
};

function problem(status, detail, extra = {}) {
  return JSON.stringify({ type: 'about:blank', title: TITLES[status] || 'Error', status, detail, ...extra });
}

module.exports = { STATUS_OF_SQLSTATE, problem };
