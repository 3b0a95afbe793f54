// Package transfertest holds what tests of the transfer need on either
// side of its seams: certificates made as an operator makes them, with the
// nomad binary (`nomad tls ca create`, `nomad tls cert create -client`),
// and a fake of the Nomad lookups (transfer.Nomad).
package transfertest
