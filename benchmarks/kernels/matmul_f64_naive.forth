\ matmul_f64_naive: C = A * B for square row-major n x n matrices, one thread per element of C
\ (block 16 x 16), the inner product over k in order.
\ The WarpForth candidate of case matmul_f64_naive (baseline: matmul_f64_naive.cu).
\! kernel matmul_f64_naive
\! param A f64[4194304]
\! param B f64[4194304]
\! param C f64[4194304]
\! param N i64

\ ( row col )
BID-Y BDIM-Y * TID-Y +
BID-X BDIM-X * TID-X +
OVER N < OVER N < AND IF
  0.0
  N 0 DO
    2 PICK N * I + CELLS A + F@
    I N * 3 PICK + CELLS B + F@
    F* F+
  LOOP
  \ C[row * n + col] = sum
  ROT N * ROT + CELLS C + F!
ELSE
  DROP DROP
THEN
