\ transpose_f32: out (cols x rows) = transpose of in (rows x cols), row-major f32, through a
\ 32 x 33 shared-memory tile so both the read and the write are coalesced; block 32 x 8, each
\ thread moves 4 elements; tiles past the edges are bounds-checked.
\ The WarpForth candidate of case transpose_f32 (baseline: transpose_f32.cu). WarpForth has no
\ f32 parameter type: the buffers are byte-addressed (4 bytes an element) with F32@ / F32!,
\ and the tile is 32 * 33 f32 values (4224 bytes) of shared memory, SF32@ / SF32!.
\! kernel transpose_f32
\! param SRC i64[33554432]
\! param OUT i64[33554432]
\! param ROWS i64
\! param COLS i64
\! shared TILE i64[528]

\ ( x y ): x = column read, y = first row read
BID-X 32 * TID-X +
BID-Y 32 * TID-Y +
32 0 DO
  OVER COLS < OVER I + ROWS < AND IF
    DUP I + COLS * 2 PICK + 4 * SRC + F32@
    TID-Y I + 33 * TID-X + 4 * TILE + SF32!
  THEN
8 +LOOP
DROP DROP
BARRIER

\ ( x y ): x = column written (a row of in), y = first row written (a column of in)
BID-Y 32 * TID-X +
BID-X 32 * TID-Y +
32 0 DO
  OVER ROWS < OVER I + COLS < AND IF
    TID-X 33 * TID-Y + I + 4 * TILE + SF32@
    OVER I + ROWS * 3 PICK + 4 * OUT + F32!
  THEN
8 +LOOP
DROP DROP
