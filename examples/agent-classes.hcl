# Several classes on one node: fast scratch space, and larger datasets with
# space reserved up front (a slot is only created while the pool can hold it).
plugin "nomad-device-zfs" {
  config {
    parent        = "tank/nomad"
    scan_interval = "15s"

    class "scratch" {
      slots = 8
      properties {
        quota       = "2G"
        compression = "lz4"
        atime       = "off"
      }
      mount = "/scratch"
    }

    class "db" {
      slots = 2
      properties {
        refquota       = "20G"
        refreservation = "20G"
        recordsize     = "16K"
        compression    = "zstd"
      }
      mount = "/var/lib/db"
    }
  }
}
