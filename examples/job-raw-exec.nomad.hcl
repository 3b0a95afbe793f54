# raw_exec ignores device mounts, so the task finds its dataset through the
# environment: ZFS_SCRATCH_HOST_PATH is the dataset's mountpoint on the host.
job "zfs-scratch-raw-exec" {
  type = "batch"

  group "g" {
    task "write" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = ["-c", <<-EOT
          echo "dataset $ZFS_SCRATCH_DATASET at $ZFS_SCRATCH_HOST_PATH"
          date > "$ZFS_SCRATCH_HOST_PATH/started"
          ls -la "$ZFS_SCRATCH_HOST_PATH"
        EOT
        ]
      }

      resources {
        device "zfs/dataset/scratch" {}
      }
    }
  }
}
