package growth

import "testing"

// TestCodesPosingAsTheVenueWithLookalikeDigits: a code is upper case, where
// the digit 0 reads as the letter O and 1 as I or L (the venue's own draw
// leaves 0, O, 1, I and L out for that reason), so "0FFICIAL", "SUPP0RT"
// and "HE1P" pose as the venue as well as the words they spell (growth
// review, 2026-11-28: only the letters were checked).
func TestCodesPosingAsTheVenueWithLookalikeDigits(t *testing.T) {
	for _, code := range []string{"0FFICIAL", "0FF1CIAL7", "SUPP0RT", "HE1P", "ADM1N", "M0DERAT0R", "C0MPLIANCE", "SYSTEM", "PERPD"} {
		if CheckCodeImpersonation(code) == nil {
			t.Errorf("%s accepted", code)
		}
	}
	for _, code := range []string{"SATS21", "B0B123", "ALPHA7", "HODL1000", "TEAM1X"} {
		if ref := CheckCodeImpersonation(code); ref != nil {
			t.Errorf("%s refused: %s", code, ref.Msg)
		}
	}
}
