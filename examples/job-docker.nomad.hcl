# docker bind-mounts the slot's dataset at the class's mount path (device
# mounts are not gated by the docker plugin's volumes.enabled), so the
# container writes to /data like an exec task does. The job needs no
# network, so it asks for none ("bridge", the default, needs Docker's
# bridge network on the client).
job "zfs-scratch-docker" {
  type = "batch"

  group "g" {
    task "write" {
      driver = "docker"

      config {
        image        = "busybox:1.35"
        command      = "sh"
        args         = ["-c", "echo hello > /data/hello && df -h /data"]
        network_mode = "none"
      }

      resources {
        device "zfs/dataset/scratch" {
          # Prefer nodes whose class compresses with lz4.
          affinity {
            attribute = "${device.attr.compression}"
            value     = "lz4"
            weight    = 50
          }
        }
      }
    }
  }
}
