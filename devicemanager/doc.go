// Package devicemanager hosts the plugin the way a Nomad client does, for
// the operator CLI and the tests: it reads an agent's configuration file
// with the agent's own decoding, and launches the plugin binary with
// Nomad's own plugin loader (helper/pluginutils/loader), so what it accepts,
// refuses and fingerprints is what the agent would.
//
//   - config.go: an agent file's plugin_dir, data_dir and plugin blocks,
//     decoded with HCL1 as the agent decodes its own file, and a block's
//     config encoded against the plugin's hclspec as the agent hands it to
//     SetConfig.
//   - host.go: Launch (the loader's catalog, the throw-away SetConfig, the
//     long-lived instance), the first fingerprint, and its conversion to the
//     node device resources the servers would hold.
package devicemanager
