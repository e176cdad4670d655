module tern

go 1.19
