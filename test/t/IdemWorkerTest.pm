# Shared by the worker's TAP tests: expired outcomes to purge, and changing
# a setting the way an operator would.
package IdemWorkerTest;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT_OK = qw(expired_outcomes_sql set_and_reload);

# An INSERT of n succeeded keys '1'..'n' in scope, finished two days ago and
# expired one day ago: exactly what the purge must delete.
sub expired_outcomes_sql {
	my ($scope, $n) = @_;
	return qq{
INSERT INTO idem.idempotency_request (scope, key, request_hash, status, recovery_point, fence,
    claimed_at, created_at, updated_at, finished_at, expires_at, response_code)
SELECT '$scope', g::text, 'h', 'succeeded', 'finished', nextval('idem.fence_seq'),
    now() - interval '2 days', now() - interval '2 days', now() - interval '2 days',
    now() - interval '2 days', now() - interval '1 day', 200
FROM generate_series(1, $n) g;
};
}

# ALTER SYSTEM and a reload (SIGHUP), as an operator would change it.
sub set_and_reload {
	my ($node, $setting, $value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $setting = '$value'");
	$node->reload;
}

1;
