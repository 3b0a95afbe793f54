# A class for stateful services: with sticky = true, an allocation that
# replaces another on this node (a destructive update, `nomad alloc stop`,
# a reschedule) gets its predecessor's dataset, renamed, not copied.
# Pair it with `ephemeral_disk { sticky = true }` in the job
# (job-sticky.nomad.hcl), which makes Nomad place the replacement on the
# same node.
plugin "nomad-device-zfs" {
  config {
    parent = "tank/nomad"

    class "state" {
      slots  = 2
      sticky = true
      # How long a failed or lost allocation's data waits for a
      # replacement to claim it before the release policy applies.
      sticky_wait = "1h"
      properties {
        refquota    = "10G"
        recordsize  = "16K"
        compression = "lz4"
      }
      mount = "/var/lib/app"
      # When no replacement claims the data (`nomad job stop`, the
      # replacement placed on another node), keep it aside for a day
      # rather than destroy it.
      release {
        policy = "snapshot"
        retain = "24h"
      }
    }
  }
}
