package market

import (
	"errors"
	"math"
	"testing"
)

func TestMulDivRoundsAsNamed(t *testing.T) {
	tests := []struct {
		name    string
		a, b, d int64
		mode    rounding
		want    int64
		wantErr bool
	}{
		{"exact", 6, 4, 3, roundFloor, 8, false},
		{"floor positive", 7, 1, 2, roundFloor, 3, false},
		{"ceil positive", 7, 1, 2, roundCeil, 4, false},
		{"trunc positive", 7, 1, 2, roundTowardZero, 3, false},
		{"floor negative", -7, 1, 2, roundFloor, -4, false},
		{"ceil negative", -7, 1, 2, roundCeil, -3, false},
		{"trunc negative", -7, 1, 2, roundTowardZero, -3, false},
		{"negative divisor", 7, 1, -2, roundFloor, -4, false},
		{"small negative truncates to zero", -1, 1, 3, roundTowardZero, 0, false},
		{"small negative floors to minus one", -1, 1, 3, roundFloor, -1, false},
		{"128-bit product", 97_000 * Q8, Q9, Q9 + 1, roundFloor, 9_699_999_990_300, false},
		{"min int64 result", math.MinInt64, 1, 1, roundFloor, math.MinInt64, false},
		{"overflow", math.MaxInt64, 2, 1, roundFloor, 0, true},
		{"negative overflow", math.MinInt64, -1, 1, roundFloor, 0, true},
		{"divide by zero", 1, 1, 0, roundFloor, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mulDiv(tc.a, tc.b, tc.d, tc.mode)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("mulDiv(%d, %d, %d) = %d, want %d", tc.a, tc.b, tc.d, got, tc.want)
			}
		})
	}
}

func TestAddCheckedRefusesOverflow(t *testing.T) {
	if _, err := addChecked(math.MaxInt64, 1); !errors.Is(err, errOverflow) {
		t.Fatalf("MaxInt64+1: err = %v", err)
	}
	if _, err := addChecked(math.MinInt64, -1); !errors.Is(err, errOverflow) {
		t.Fatalf("MinInt64-1: err = %v", err)
	}
	if v, err := addChecked(math.MaxInt64-1, 1); err != nil || v != math.MaxInt64 {
		t.Fatalf("MaxInt64-1+1 = %d, %v", v, err)
	}
}

func TestFloorToAlignsNegativeTimestamps(t *testing.T) {
	for _, tc := range []struct{ ts, step, want int64 }{
		{0, 60, 0}, {59, 60, 0}, {60, 60, 60}, {-1, 60, -60}, {-60, 60, -60},
	} {
		if got := floorTo(tc.ts, tc.step); got != tc.want {
			t.Errorf("floorTo(%d, %d) = %d, want %d", tc.ts, tc.step, got, tc.want)
		}
	}
}
