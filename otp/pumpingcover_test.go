package otp

import "testing"

func TestHoldCovers(t *testing.T) {
	glo, err := ParsePhone("+2348051034567", "")
	if err != nil {
		t.Fatal(err)
	}
	if glo.PumpingOperator() != "NG/Glo" {
		t.Fatalf("operator subject %q, want NG/Glo", glo.PumpingOperator())
	}
	us, err := ParsePhone("+14155552671", "")
	if err != nil {
		t.Fatal(err)
	}
	intl, err := ParsePhone("+80012345678", "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		subject string
		phone   Phone
		want    bool
	}{
		{"+2348051034xxx", glo, true},
		{"+2348051035xxx", glo, false},
		{"+234805103456", glo, false}, // no x: not a range
		{"NG/Glo", glo, true},
		{"NG/MTN", glo, false},
		{"GH/Glo", glo, false},
		{"NG", glo, true},
		{"GH", glo, false},
		{"US", us, true},
		{"US/", us, false}, // the US has no operator data
		{"001", intl, true},
		{"198.51.100.0/24", glo, false},
	}
	for _, tt := range tests {
		if got := (PumpingHold{Subject: tt.subject}).Covers(tt.phone); got != tt.want {
			t.Errorf("%s covers %s = %v, want %v", tt.subject, tt.phone.E164, got, tt.want)
		}
	}
	held := []PumpingHold{{Subject: "NG/Glo"}, {Subject: "NG/MTN"}, {Subject: "NG"}}
	if got := HoldsCovering(held, glo); len(got) != 2 || got[0].Subject != "NG/Glo" || got[1].Subject != "NG" {
		t.Errorf("HoldsCovering = %+v", got)
	}
}
