#include "textflag.h"

// func prefetch(addrs *[peekAhead]uintptr), peekAhead = 8 (index_match.go)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVD addrs+0(FP), R0
	MOVD 0(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 8(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 16(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 24(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 32(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 40(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 48(R0), R1
	PRFM (R1), PLDL1KEEP
	MOVD 56(R0), R1
	PRFM (R1), PLDL1KEEP
	RET
