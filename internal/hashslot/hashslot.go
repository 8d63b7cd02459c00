// Package hashslot is Redis Cluster's hash slot of a key, computed here so
// that calls can be grouped by slot before they are made.
package hashslot

import "strings"

// Of is Redis Cluster's slot of a key: the slot of its hash tag (the first
// {...} with something inside), else of the whole key.
func Of(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return OfTag(key)
}

// OfTag is the slot of every key whose hash tag is tag: CRC16 (XMODEM)
// modulo 16384.
func OfTag(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// Groups gathers items by slot, the groups in order of their first item,
// each keeping its items' order. The zero value is empty.
type Groups[T any] struct {
	index map[uint16]int
	list  [][]T
}

// Add puts item in slot's group.
func (g *Groups[T]) Add(slot uint16, item T) {
	if g.index == nil {
		g.index = map[uint16]int{}
	}
	i, ok := g.index[slot]
	if !ok {
		i = len(g.list)
		g.index[slot] = i
		g.list = append(g.list, nil)
	}
	g.list[i] = append(g.list[i], item)
}

// List is the groups, in order of their first item.
func (g *Groups[T]) List() [][]T { return g.list }
