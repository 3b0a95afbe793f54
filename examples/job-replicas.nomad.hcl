# A stateful service on the replicating class of agent-replicas.hcl. When
# its node is lost, Nomad places the replacement on another node; the
# device affinity makes it prefer a node that keeps a replica of this
# group, whose plugin then hands the replacement that replica.
job "pg" {
  type = "service"

  group "db" {
    # Without this, nothing stops the allocation on a node that is only
    # cut off, and no replica is ever taken over (it could still write).
    # The replacement's task starts about D + kill_timeout + 35 s after
    # the servers mark the allocation lost. Never max_client_disconnect
    # on such a group: it keeps the allocation running while cut off.
    stop_after_client_disconnect = "30s"

    # Nomad prefers the previous allocation's node for the same data when
    # it is alive (an update, a restart): the data stays put.
    ephemeral_disk {
      sticky = true
    }

    task "db" {
      driver       = "exec"
      kill_timeout = "10s"

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          trap 'exit 0' INT TERM
          f=$ZFS_PG_MOUNT/count
          n=$(cat "$f" 2>/dev/null || echo 0)
          echo "starts at $n (allocation $NOMAD_ALLOC_ID)"
          while true; do
            n=$((n + 1))
            echo "$n" > "$f.tmp" && mv "$f.tmp" "$f"
            sleep 10 & wait $!
          done
        EOT
        ]
      }

      resources {
        device "zfs/dataset/pg" {
          # The nodes that keep a replica of a group list it in their
          # device's `replicas` attribute: <namespace>/<job>/<group>.
          affinity {
            attribute = "${device.attr.replicas}"
            operator  = "set_contains"
            value     = "default/pg/db"
            weight    = 100
          }
        }
      }
    }
  }
}
