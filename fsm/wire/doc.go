// Package wire holds the small value types shared by the state machine's
// results and the HTTP layer: the decimal-string integer of SPEC section 1
// and the refusal (error code + status) that both layers speak.
//
// It must never import anything from node/, httpapi/ or the clock: the FSM
// builds its stored results with these types, so they must encode the same
// bytes on every replica.
package wire
