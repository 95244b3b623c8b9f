// Package flowq is the waiting room of on_saturation: queue: the picks of a
// saturated pool that wait in the router for capacity.
//
// A Queue is one pool's waiting room. It is a state machine driven by its
// callers, with the time passed in (no clock, no goroutine, no timer of its
// own): a waiting pick is a Ticket, and the only goroutine that waits for it
// is the caller's own (Wait). Dispatch order:
//
//  1. strict priority bands: a higher Item.Priority is always served first;
//  2. fairness between flows within a band, by prompt tokens dispatched (a
//     virtual token counter per flow, lifted to the least counter of the
//     band's waiting flows when a flow starts waiting again, so that a flow
//     cannot bank credit while idle): the waiting flow with the fewest
//     tokens dispatched goes first, so a flow of long prompts cannot starve
//     one of short prompts;
//  3. FCFS within a flow.
//
// Capacity is handed out one pick at a time (the baton): Kick grants the
// next ticket when no grant is outstanding; its holder retries its pick and
// Settles the grant: Dispatched passes the baton to the next ticket (the
// pick updated the router's optimistic ledger first, so the next retry sees
// it), Saturated puts the ticket back at the head of its flow and stops
// until the next Kick (a load report, an outcome). At most one grant per
// Queue is outstanding, so a burst of capacity events cannot release a herd
// of picks onto the same instances between two reports.
//
// Limits (Limits): at most MaxWaiting tickets per Queue and MaxPerBand per
// priority band; at a limit Enqueue displaces the newest ticket of a lower
// band, or of a flow of its band with at least two more waiting than its
// own (that ticket leaves with ErrQueueFull), else refuses the new one
// with ErrQueueFull. Tickets
// with a deadline leave at it (Expire, or their own Wait) with
// ErrQueueTimeout. Negative priorities are sheddable: Enqueue refuses them
// with ErrSheddable.
package flowq
