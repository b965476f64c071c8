package nats

// Crash drops l's connection as a killed process would: its consumer group members write nothing
// more, so their partitions stay leased to them until the leases expire.
func (l *Log) Crash() { l.nc.Close() }
