package flowq

// deadlineHeap is a binary min-heap of waiting tickets by deadline (then
// sequence), each knowing its index (Ticket.heapAt) so that a cancel
// removes it in O(log n).
type deadlineHeap []*Ticket

func (h deadlineHeap) less(i, j int) bool {
	a, b := h[i].item.Deadline, h[j].item.Deadline
	if a.Equal(b) {
		return h[i].seq < h[j].seq
	}
	return a.Before(b)
}

func (h deadlineHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = i, j
}

func (h *deadlineHeap) add(t *Ticket) {
	t.heapAt = len(*h)
	*h = append(*h, t)
	h.up(t.heapAt)
}

func (h *deadlineHeap) remove(t *Ticket) {
	i, last := t.heapAt, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	t.heapAt = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h deadlineHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h deadlineHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}
