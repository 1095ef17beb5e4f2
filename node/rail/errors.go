package rail

import (
	"errors"
	"fmt"
)

// ValidationError is input the rail refuses. Its message is written for the
// API client (it becomes the `error` text of a `validation` refusal) and
// never contains secrets.
type ValidationError struct {
	Reason string
	Err    error // the sentinel or underlying cause, if any
}

func (e *ValidationError) Error() string { return e.Reason }

func (e *ValidationError) Unwrap() error { return e.Err }

// Causes a caller may branch on with errors.Is.
var (
	// ErrWrongNetwork: a well-formed destination of another network
	// (a mainnet invoice on testnet, a regtest Spark address on mainnet).
	ErrWrongNetwork = errors.New("rail: destination is for another network")
	// ErrUnknownInvoice: an invoice this rail did not issue.
	ErrUnknownInvoice = errors.New("rail: unknown invoice")
	// ErrInvoiceExpired: the invoice's expiry has passed.
	ErrInvoiceExpired = errors.New("rail: invoice expired")
	// ErrAmountRequired: an amountless invoice paid without an amount.
	ErrAmountRequired = errors.New("rail: amount required")
	// ErrAmountMismatch: an amount that differs from the invoice's own.
	ErrAmountMismatch = errors.New("rail: amount does not match invoice")
)

func invalid(cause error, format string, args ...any) *ValidationError {
	return &ValidationError{Reason: fmt.Sprintf(format, args...), Err: cause}
}
