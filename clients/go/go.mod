module lockd

go 1.19
