package pebblekit

// The key spaces of a Pebble engine that the embedded backends share (rookery serve's data
// directory holds one engine for the table store, the event log and the home timelines, so that
// they share one write-ahead log). Every key starts with one space byte, and each space has one
// owner, which reads and writes only its own: this is the only place that picks them.
const (
	// table/pebble
	TableItems   byte = 'b' // base items
	TableIndexes byte = 'i' // index entries
	TableTTL     byte = 't' // TTL entries

	// events/embedded
	LogMeta     byte = 'm' // the partition count
	LogEvents   byte = 'e' // stored events
	LogDedup    byte = 'd' // de-duplication ids
	LogOffsets  byte = 'o' // consumer groups' offsets
	LogDead     byte = 'q' // dead letters
	LogReplayed byte = 'r' // replayed events

	// timeline/pebblestore
	TimelineMarkers byte = 'h' // a timeline's marker (its expiry and state)
	TimelineEntries byte = 'f' // timeline entries
	TimelinePosts   byte = 'g' // the post index: the timelines given a post
)

// Space is one key space and its owner.
type Space struct {
	Byte  byte
	Owner string
	What  string
}

// Spaces lists every space (TestSpacesAreDistinct checks that no two share a byte).
var Spaces = []Space{
	{TableItems, "table/pebble", "base items"},
	{TableIndexes, "table/pebble", "index entries"},
	{TableTTL, "table/pebble", "TTL entries"},
	{LogMeta, "events/embedded", "the partition count"},
	{LogEvents, "events/embedded", "stored events"},
	{LogDedup, "events/embedded", "de-duplication ids"},
	{LogOffsets, "events/embedded", "consumer groups' offsets"},
	{LogDead, "events/embedded", "dead letters"},
	{LogReplayed, "events/embedded", "replayed events"},
	{TimelineMarkers, "timeline/pebblestore", "timeline markers"},
	{TimelineEntries, "timeline/pebblestore", "timeline entries"},
	{TimelinePosts, "timeline/pebblestore", "the post index"},
}

// Bounds returns the iterator bounds of the whole space s.
func Bounds(s byte) (lower, upper []byte) { return []byte{s}, []byte{s + 1} }
