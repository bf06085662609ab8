package memdynamo

import (
	"math/big"
	"strconv"
	"strings"
)

// decimal is a DynamoDB number: coef × 10^exp, exact. DynamoDB keeps up to
// 38 significant digits with magnitudes from 1E-130 to below 1E+126, and
// returns numbers in a canonical form ("1.50" reads back as "1.5").
type decimal struct {
	neg  bool
	coef big.Int // never negative
	exp  int
}

const (
	maxDigits = 38
	maxExp    = 126  // magnitude must be < 1E+126
	minExp    = -130 // magnitude must be >= 1E-130
)

// parseNumber parses a DynamoDB number literal. The error message is the one
// DynamoDB gives.
func parseNumber(s string) (decimal, error) {
	var d decimal
	if s == "" {
		return d, validation("A value provided cannot be converted into a number")
	}
	i := 0
	if s[0] == '+' || s[0] == '-' {
		d.neg = s[0] == '-'
		i++
	}
	var digits strings.Builder
	seenDigit, seenDot := false, false
	frac := 0
scan:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			seenDigit = true
			digits.WriteByte(c)
			if seenDot {
				frac++
			}
		case c == '.' && !seenDot:
			seenDot = true
		default:
			break scan
		}
	}
	if !seenDigit {
		return d, validation("A value provided cannot be converted into a number")
	}
	e := 0
	if i < len(s) {
		if s[i] != 'e' && s[i] != 'E' {
			return d, validation("A value provided cannot be converted into a number")
		}
		n, err := strconv.Atoi(s[i+1:])
		if err != nil || s[i+1:] == "" || s[i+1] == ' ' {
			return d, validation("A value provided cannot be converted into a number")
		}
		e = n
	}
	if _, ok := d.coef.SetString(digits.String(), 10); !ok {
		return d, validation("A value provided cannot be converted into a number")
	}
	d.exp = e - frac
	d.normalize()
	if d.coef.Sign() == 0 {
		return d, nil
	}
	nd := len(d.coef.String())
	if nd > maxDigits {
		return d, validation("DynamoDB only supports precision up to 38 digits")
	}
	// The magnitude is between 10^(exp+nd-1) and 10^(exp+nd).
	if d.exp+nd-1 >= maxExp {
		return d, validation("Number overflow. Attempting to store a number with magnitude larger than supported range")
	}
	if d.exp < minExp {
		return d, validation("Number underflow. Attempting to store a number with magnitude smaller than supported range")
	}
	return d, nil
}

var ten = big.NewInt(10)

// normalize strips trailing zeros so that equal numbers have one form.
func (d *decimal) normalize() {
	if d.coef.Sign() == 0 {
		d.neg, d.exp = false, 0
		return
	}
	var q, r big.Int
	for {
		q.QuoRem(&d.coef, ten, &r)
		if r.Sign() != 0 {
			return
		}
		d.coef.Set(&q)
		d.exp++
	}
}

// String returns the canonical plain decimal form DynamoDB returns.
func (d decimal) String() string {
	digits := d.coef.String()
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	switch {
	case d.exp >= 0:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", d.exp))
	case -d.exp < len(digits):
		b.WriteString(digits[:len(digits)+d.exp])
		b.WriteByte('.')
		b.WriteString(digits[len(digits)+d.exp:])
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -d.exp-len(digits)))
		b.WriteString(digits)
	}
	return b.String()
}

// signed returns the value as a signed integer scaled to 10^exp (exp <= d.exp).
func (d decimal) scaled(exp int) *big.Int {
	v := new(big.Int).Set(&d.coef)
	if d.exp > exp {
		v.Mul(v, new(big.Int).Exp(ten, big.NewInt(int64(d.exp-exp)), nil))
	}
	if d.neg {
		v.Neg(v)
	}
	return v
}

func cmpDecimal(a, b decimal) int {
	e := min(a.exp, b.exp)
	return a.scaled(e).Cmp(b.scaled(e))
}

func addDecimal(a, b decimal, sub bool) (decimal, error) {
	e := min(a.exp, b.exp)
	x, y := a.scaled(e), b.scaled(e)
	if sub {
		x.Sub(x, y)
	} else {
		x.Add(x, y)
	}
	var r decimal
	r.neg = x.Sign() < 0
	r.coef.Abs(x)
	r.exp = e
	r.normalize()
	// Re-validate the range and precision of the result.
	return parseNumber(r.String())
}

// fastInt parses a canonical integer (no sign other than '-', no leading
// zeros) without allocating: the common case of epoch times and counters.
func fastInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	i := 0
	if s[0] == '-' {
		i = 1
		if len(s) == 1 {
			return 0, false
		}
	}
	if s[i] == '0' && len(s) > i+1 {
		return 0, false
	}
	if s == "-0" {
		return 0, false
	}
	var n int64
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if s[0] == '-' {
		n = -n
	}
	return n, true
}

// canonicalNumber validates s and returns DynamoDB's form of it.
func canonicalNumber(s string) (string, error) {
	if _, ok := fastInt(s); ok {
		return s, nil
	}
	d, err := parseNumber(s)
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// compareNumbers compares two valid DynamoDB numbers numerically.
func compareNumbers(a, b string) int {
	if x, ok := fastInt(a); ok {
		if y, ok := fastInt(b); ok {
			switch {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	da, _ := parseNumber(a)
	db, _ := parseNumber(b)
	return cmpDecimal(da, db)
}

// arith adds or subtracts two valid DynamoDB numbers.
func arith(a, b string, sub bool) (string, error) {
	if x, ok := fastInt(a); ok {
		if y, ok := fastInt(b); ok {
			if sub {
				y = -y
			}
			return strconv.FormatInt(x+y, 10), nil // |x|,|y| < 1e18: no overflow
		}
	}
	da, err := parseNumber(a)
	if err != nil {
		return "", err
	}
	db, err := parseNumber(b)
	if err != nil {
		return "", err
	}
	r, err := addDecimal(da, db, sub)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}
