\ scale_i64: y[i] = k * x[i] + c for i < n (int64, wrapping), grid-stride loop.
\ The WarpForth candidate of case scale_i64 (benchmarks/cases.toml); the CUDA baseline is
\ scale_i64.cu. Array sizes in the header are documentation only (WarpForth passes bare
\ pointers): the loop bounds-checks against N.
\! kernel scale_i64
\! param X i64[134217728]
\! param Y i64[134217728]
\! param K i64
\! param C i64
\! param N i64

\ i = global thread index; stride = GDIM-X * BDIM-X
GLOBAL-ID
BEGIN DUP N < WHILE
  DUP CELLS X + @ K * C +
  OVER CELLS Y + !
  GDIM-X BDIM-X * +
REPEAT
DROP
