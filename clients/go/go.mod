module informerd.io/clients/go

go 1.26
