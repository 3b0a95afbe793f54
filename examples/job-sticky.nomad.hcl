# A stateful service on the sticky class of agent-sticky.hcl. Each start
# reads the count its predecessors left in the class's mount
# (ZFS_STATE_MOUNT, /var/lib/app there) and goes on from there: change
# VERSION and run the job again (a destructive update), or `nomad alloc
# stop` the allocation, and the new allocation continues the count,
# because the plugin hands it the old allocation's dataset.
job "counter" {
  type = "service"

  group "app" {
    # Nomad tries the previous allocation's node first for a group with a
    # sticky ephemeral disk, and takes it when the node is ready and
    # feasible, whatever other nodes score. The data only follows on that
    # node: on another node the replacement starts empty and the old data
    # goes by the class's release policy.
    ephemeral_disk {
      sticky = true
    }

    task "count" {
      driver = "exec"

      env {
        VERSION = "1"
      }

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          # The shell is the task's PID 1: without a handler it ignores
          # Nomad's stop signal and is killed after kill_timeout.
          trap 'exit 0' INT TERM
          f=$ZFS_STATE_MOUNT/count
          n=$(cat "$f" 2>/dev/null || echo 0)
          echo "version $VERSION starts at $n (allocation $NOMAD_ALLOC_ID)"
          while true; do
            n=$((n + 1))
            echo "$n" > "$f.tmp" && mv "$f.tmp" "$f"
            sleep 10 & wait $!
          done
        EOT
        ]
      }

      resources {
        device "zfs/dataset/state" {}
      }
    }
  }
}
