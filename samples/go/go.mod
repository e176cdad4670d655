module tern-sample

go 1.19

require tern v0.0.0

replace tern => ../../bindings/go
