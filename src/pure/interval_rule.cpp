#include "pure/pure.hpp"

#include "pure/interval_rule.hpp"

namespace idem::interval_rule {

namespace {
constexpr __int128 usecs_per_hour = __int128{3600} * 1000000;
constexpr __int128 usecs_per_day = 24 * usecs_per_hour;
constexpr int shortest_month_days = 28;
constexpr int longest_month_days = 31;
}  // namespace

__int128 least_length_usecs(std::int32_t months, std::int32_t days, std::int64_t usecs) {
  __int128 calendar_days =
      __int128{days} + __int128{months} * (months >= 0 ? shortest_month_days : longest_month_days);
  __int128 length = calendar_days * usecs_per_day + usecs;
  if (calendar_days != 0) length -= usecs_per_hour;
  return length;
}

}  // namespace idem::interval_rule
