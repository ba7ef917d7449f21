#include "pure/pure.hpp"

#include "pure/batch_pace.hpp"

namespace idem::batch_pace {

int pause_after_full_batch_ms(int delay_ms, int full_in_a_row) {
  if (delay_ms <= 0 || full_in_a_row < 1 || full_in_a_row > paced_full_batches) return 0;
  return delay_ms >> (full_in_a_row - 1);
}

}  // namespace idem::batch_pace
