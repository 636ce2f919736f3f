\ axpy_f64: y[i] = a * x[i] + y[i] for i < n, grid-stride loop.
\ The WarpForth candidate of case axpy_f64 (baseline: axpy_f64.cu). A is an f64 scalar
\ parameter (`.param .f64`), the same ABI as the CUDA kernel's `double a`.
\! kernel axpy_f64
\! param X f64[134217728]
\! param Y f64[134217728]
\! param A f64
\! param N i64

GLOBAL-ID
BEGIN DUP N < WHILE
  A OVER CELLS X + F@ F*
  OVER CELLS Y + F@ F+
  OVER CELLS Y + F!
  GDIM-X BDIM-X * +
REPEAT
DROP
