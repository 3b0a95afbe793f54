# A class cloned from a golden snapshot: every allocation starts from a
# writable copy of a seeded database in milliseconds, and gets a fresh copy
# after each release. The plugin never changes the snapshot (a clone pins
# it: `zfs destroy tank/golden/pg@seed` fails while slots exist).
#
#   zfs create tank/golden && zfs create tank/golden/pg
#   ... load the seed data into /tank/golden/pg ...
#   zfs snapshot tank/golden/pg@seed
#
plugin "nomad-device-zfs" {
  config {
    parent = "tank/nomad"

    class "pg" {
      slots         = 3
      from_snapshot = "tank/golden/pg@seed"
      mount         = "/var/lib/postgresql/data"
      properties {
        refquota = "20G"
      }
      # Keep a failed run's database for a day for a post-mortem
      # (nomad-device-zfs-ctl status lists it); throw successful runs away.
      release {
        policy     = "destroy"
        on_failure = "snapshot"
        retain     = "24h"
        retain_max = 5
      }
    }
  }
}
