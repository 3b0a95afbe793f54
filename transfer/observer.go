package transfer

// Observer is told of the stream bytes as they move, by kind (a
// migration's pull or a replica's): what this node's Server wrote to its
// peers, and what its Client read from them, a write or a read at a time
// (up to a read of zfs send's stdout, 256 KiB). A stream cut midway has
// told what moved before the cut. It is called on the stream's own
// goroutine, so it must not block; the plugin's metrics count it
// (metrics.Metrics, nomad_device_zfs_transfer_*_bytes_total).
type Observer interface {
	// Sent: n bytes of a stream of kind written to a peer (the response
	// body, before HTTP/2 framing and TLS).
	Sent(kind string, n int)
	// Received: n bytes of a stream of kind read from a peer, handed to
	// zfs receive.
	Received(kind string, n int)
}

// ObservedMigration is the kind an Observer is told for a migration's
// stream (Request.Kind ""); a replica's is KindReplica.
const ObservedMigration = "migration"

// ObservedKinds are every kind an Observer is told.
var ObservedKinds = []string{ObservedMigration, KindReplica}

// observedKind is a request's kind as an Observer is told it.
func observedKind(kind string) string {
	if kind == KindReplica {
		return KindReplica
	}
	return ObservedMigration
}

// nopObserver is the Observer of a Server or Client given none.
type nopObserver struct{}

func (nopObserver) Sent(string, int)     {}
func (nopObserver) Received(string, int) {}
