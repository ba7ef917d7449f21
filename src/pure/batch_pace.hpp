// How long the worker pauses after a full batch, from what it knows of the
// backlog without counting it. Pure C++, unit-tested alone.
//
// A full batch says only that the backlog was at least one batch; k full
// batches in a row say it was at least k. A small backlog (a round's worth of
// keys expiring at an ordinary rate) is worked off with pauses, so the
// requests see the worker only in bounded slices; a backlog that keeps the
// batches full is one the paced worker is losing against (at idem.batch_size
// 10,000 and idem.batch_delay 2 s the pause alone caps it near 5,000 rows a
// second), so the pause shrinks with every further full batch and, past
// paced_full_batches in a row, the worker goes flat out until a batch comes
// back short. idem.batch_delay is the ceiling of any pause, never the pace.
#pragma once

namespace idem::batch_pace {

// Full batches in a row that are followed by a pause; the ones after them go
// without. With the pause halved each time, a large backlog costs at most
// delay * (1 + 1/2 + 1/4 + 1/8) < 2 * delay of pauses per round.
inline constexpr int paced_full_batches = 4;

// The pause in milliseconds after the full_in_a_row-th full batch in a row
// (1 for the first) of one stage of a round, with idem.batch_delay = delay_ms:
// delay_ms after the first, half of it after the second, a quarter after the
// third, an eighth after the fourth, none from the fifth on. 0 for a delay of
// 0 or less, or a count below 1.
int pause_after_full_batch_ms(int delay_ms, int full_in_a_row);

}  // namespace idem::batch_pace
