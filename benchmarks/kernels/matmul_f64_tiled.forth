\ matmul_f64_tiled: C = A * B for square row-major n x n matrices with 16 x 16 shared-memory
\ tiles (block 16 x 16, one thread per element of C); tiles past the edge are padded with zeros.
\ The WarpForth candidate of case matmul_f64_tiled (baseline: matmul_f64_tiled.cu).
\! kernel matmul_f64_tiled
\! param A f64[4194304]
\! param B f64[4194304]
\! param C f64[4194304]
\! param N i64
\! shared TA f64[256]
\! shared TB f64[256]

\ ( row col sum )
BID-Y 16 * TID-Y +
BID-X 16 * TID-X +
0.0
N 0 DO
  \ TA[ty][tx] = row < n && t + tx < n ? A[row * n + t + tx] : 0
  2 PICK N < I TID-X + N < AND IF
    2 PICK N * I + TID-X + CELLS A + F@
  ELSE 0.0 THEN
  TID-Y 16 * TID-X + CELLS TA + SF!
  \ TB[ty][tx] = t + ty < n && col < n ? B[(t + ty) * n + col] : 0
  I TID-Y + N < 2 PICK N < AND IF
    I TID-Y + N * 2 PICK + CELLS B + F@
  ELSE 0.0 THEN
  TID-Y 16 * TID-X + CELLS TB + SF!
  BARRIER
  16 0 DO
    TID-Y 16 * I + CELLS TA + SF@
    I 16 * TID-X + CELLS TB + SF@
    F* F+
  LOOP
  BARRIER
16 +LOOP
2 PICK N < 2 PICK N < AND IF
  ROT N * ROT + CELLS C + F!
ELSE
  DROP DROP DROP
THEN
