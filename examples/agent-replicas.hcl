# A class whose data survives the loss of its node (docs/node-loss.md):
# while an allocation holds a slot, one other node keeps a copy of it,
# pulled as an increment at least every minute. When the holder's node is
# lost, the replacement placed on the copy's node takes it over
# (job-replicas.nomad.hcl makes Nomad prefer that node). Put this block,
# with each node's own TLS files, on every client that may run the job or
# keep its copy.
plugin "nomad-device-zfs" {
  config {
    parent = "tank/nomad"

    # Replicas travel on the migration's transport: mutual TLS between the
    # plugins, with the Nomad agents' CA and client certificates
    # (docs/sticky-and-migration.md).
    transfer {
      address   = "0.0.0.0:4680"
      ca_file   = "/etc/nomad.d/tls/nomad-agent-ca.pem"
      cert_file = "/etc/nomad.d/tls/global-client-nomad.pem"
      key_file  = "/etc/nomad.d/tls/global-client-nomad-key.pem"
    }

    class "pg" {
      slots  = 2
      sticky = true
      mount  = "/var/lib/postgresql"
      properties {
        compression = "lz4"
      }
      # A replacement's start waits this long for its data (a copy from a
      # live node, or the takeover of a replica), then fails: Nomad
      # restarts it. Above a minute plus the job's shutdown delays: the
      # takeover waits about 40 s past Nomad's placement.
      migrate {
        timeout    = "10m"
        on_timeout = "fail"
      }
      replicate {
        copies = 1                  # other nodes that keep a copy (1-5)
        every  = "1m"               # the data lost with a node: at most this, plus one transfer
        spread = "node.datacenter"  # copies in other datacenters when there are some
      }
      release {
        policy = "snapshot"
        retain = "24h"
      }
    }
  }
}
