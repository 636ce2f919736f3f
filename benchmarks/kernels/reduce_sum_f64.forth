\ reduce_sum_f64: one-stage block reduction. Block b sums x[b*256 .. b*256+255] with a tree
\ reduction in shared memory (a barrier between levels) and writes out[b]; n = 256 * blocks.
\ The WarpForth candidate of case reduce_sum_f64 (baseline: reduce_sum_f64.cu).
\! kernel reduce_sum_f64
\! param X f64[134217728]
\! param OUT f64[524288]
\! param N i64
\! shared PARTIAL f64[256]

\ PARTIAL[t] = i < n ? x[i] : 0
GLOBAL-ID DUP N < IF CELLS X + F@ ELSE DROP 0.0 THEN
TID-X CELLS PARTIAL + SF!
BARRIER

\ width = 128, 64, ..., 1: PARTIAL[t] += PARTIAL[t + width] for t < width
128 BEGIN DUP 0 > WHILE
  TID-X OVER < IF
    TID-X CELLS PARTIAL + SF@
    TID-X 2 PICK + CELLS PARTIAL + SF@ F+
    TID-X CELLS PARTIAL + SF!
  THEN
  BARRIER
  2 /
REPEAT
DROP

TID-X 0= IF
  0 CELLS PARTIAL + SF@
  BID-X CELLS OUT + F!
THEN
