\ attention_f32_naive: causal single-head attention, O = softmax(Q K^T / sqrt(d), causal) V.
\ f32 inputs and output, f64 arithmetic inside. One block per query row (BID-X), one thread per
\ key (TID-X, BDIM-X == SEQ); the scores live in static shared memory (SEQ <= 1024).
\ The WarpForth candidate of case attention_f32_naive (baseline: attention_f32_naive.cu).
\ WarpForth has no f32 parameter type: Q, K, V and O are byte-addressed (4 bytes an element)
\ with F32@ / F32!, which widen to and narrow from f64.
\! kernel attention_f32_naive
\! param Q i64[32768]
\! param K i64[32768]
\! param V i64[32768]
\! param O i64[32768]
\! param SEQ i64
\! param D i64
\! shared SCORES f64[1024]
\! shared STATS f64[2]

\ score = Q[query, :] . K[key, :] / sqrt(d), masked to -1e30 for key > query
0.0
D 0 DO
  BID-X D * I + 4 * Q + F32@
  TID-X D * I + 4 * K + F32@
  F* F+
LOOP
D S>F FSQRT F/
TID-X BID-X > IF DROP -1.0e30 THEN
TID-X CELLS SCORES + SF!
BARRIER

\ STATS[0] = max of the row (thread 0)
TID-X 0= IF
  0 CELLS SCORES + SF@
  SEQ 1 DO I CELLS SCORES + SF@ FMAX LOOP
  0 CELLS STATS + SF!
THEN
BARRIER

TID-X CELLS SCORES + SF@ 0 CELLS STATS + SF@ F- FEXP
TID-X CELLS SCORES + SF!
BARRIER

\ STATS[1] = sum of the row (thread 0)
TID-X 0= IF
  0.0
  SEQ 0 DO I CELLS SCORES + SF@ F+ LOOP
  1 CELLS STATS + SF!
THEN
BARRIER

TID-X CELLS SCORES + SF@ 1 CELLS STATS + SF@ F/
TID-X CELLS SCORES + SF!
BARRIER

\ O[query, col] = sum over t of SCORES[t] * V[t, col], col = key, key + BDIM-X, ... < d
TID-X BEGIN DUP D < WHILE
  0.0
  SEQ 0 DO
    I CELLS SCORES + SF@
    I D * 3 PICK + 4 * V + F32@
    F* F+
  LOOP
  OVER BID-X D * + 4 * O + F32!
  BDIM-X +
REPEAT
DROP
