// The one rule for every interval idem accepts (lock_timeout, retention,
// max_wait, extend_by, an inbox retention, a lease, a retry_after, and the
// interval columns of idem.scope_policy). Pure C++, unit-tested alone.
//
// An interval is three fields: months and days, added on the calendar in
// the session's time zone, then microseconds. How long it lasts depends on
// the moment it is added to: '-1 mon 31 days' is a day after a 30-day month
// and nothing after a 31-day one. PostgreSQL's own comparison counts a month
// as 30 days, so '> 0' lets that value through, and a row stored with it
// breaks its own CHECK. idem asks instead for the least length the interval
// can have from any moment:
//   - a month counts as 28 days when it is added and 31 when it is
//     subtracted (adding a month moves the date by 28 to 31 days, the end of
//     a month clipped to a shorter one included);
//   - a day counts as 24 hours, and when months and days move the date at
//     all, one hour is taken off for a daylight-saving change between the
//     two moments;
//   - the microseconds count as they are.
// "Positive" means that least length is above zero: the interval moves every
// moment forward, whatever the date and the time zone (with daylight-saving
// changes of at most an hour). "Not negative" (retry_after, where zero means
// "at once") means it is at least zero. Callers refuse infinite intervals
// before asking.
#pragma once

#include <cstdint>

namespace idem::interval_rule {

// The least number of microseconds the interval adds to any moment.
// Exact: computed in 128 bits, so no field's range can overflow it.
__int128 least_length_usecs(std::int32_t months, std::int32_t days, std::int64_t usecs);

inline bool is_positive(std::int32_t months, std::int32_t days, std::int64_t usecs) {
  return least_length_usecs(months, days, usecs) > 0;
}

inline bool is_not_negative(std::int32_t months, std::int32_t days, std::int64_t usecs) {
  return least_length_usecs(months, days, usecs) >= 0;
}

}  // namespace idem::interval_rule
