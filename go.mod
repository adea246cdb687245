module github.com/slidegate/slidegate

go 1.23
