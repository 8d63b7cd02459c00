package boundedmap

// order keeps a shard's keys in the order they were first put, in a ring,
// for DropOldest. Slots and held keys carry sequence numbers, so the slot
// left behind by a key dropped and put again evicts nothing when its turn
// comes.
type order struct {
	ring []slot
	seqs map[string]uint64 // the slot each held key's entry came with
	head int               // oldest slot
	n    int               // slots in use
	seq  uint64            // last sequence number given
}

type slot struct {
	key string
	seq uint64
}

func newOrder(size int) order {
	return order{ring: make([]slot, size), seqs: make(map[string]uint64, size)}
}

// putInOrder sets key to v in sh, a new key first making room by dropping
// the oldest slot's key. A shard with no room holds nothing.
func (c *Map[V]) putInOrder(sh *shard[V], key string, v V) {
	if _, ok := sh.m[key]; ok {
		sh.m[key] = v
		return
	}
	o := &sh.order
	if len(o.ring) == 0 {
		return
	}
	if o.n == len(o.ring) {
		old := o.ring[o.head]
		if seq, ok := o.seqs[old.key]; ok && seq == old.seq {
			if _, held := sh.m[old.key]; held {
				delete(sh.m, old.key)
				c.n.Add(-1)
			}
			delete(o.seqs, old.key)
		}
		o.head = (o.head + 1) % len(o.ring)
		o.n--
	}
	o.seq++
	o.ring[(o.head+o.n)%len(o.ring)] = slot{key: key, seq: o.seq}
	o.n++
	o.seqs[key] = o.seq
	sh.m[key] = v
	c.n.Add(1)
}

func (o *order) clear() {
	clear(o.ring)
	clear(o.seqs)
	o.head, o.n = 0, 0
}
