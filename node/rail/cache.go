package rail

// fifoCache is a map bounded to limit entries; inserting into a full cache
// evicts the oldest insertion. Not safe for concurrent use: SimRail guards
// it with its mutex.
type fifoCache[V any] struct {
	limit int
	items map[string]V
	ring  []string // keys in insertion order; ring[next] is the oldest once full
	next  int
}

func newFIFOCache[V any](limit int) *fifoCache[V] {
	if limit < 1 {
		panic("rail: cache limit must be positive")
	}
	return &fifoCache[V]{limit: limit, items: make(map[string]V)}
}

func (c *fifoCache[V]) get(k string) (V, bool) {
	v, ok := c.items[k]
	return v, ok
}

// put stores v under k. Replacing an existing key keeps its age.
func (c *fifoCache[V]) put(k string, v V) {
	if _, ok := c.items[k]; ok {
		c.items[k] = v
		return
	}
	if len(c.ring) < c.limit {
		c.ring = append(c.ring, k)
	} else {
		delete(c.items, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % c.limit
	}
	c.items[k] = v
}

func (c *fifoCache[V]) len() int { return len(c.items) }
