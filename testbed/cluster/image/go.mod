module streamapp.local/pause

go 1.21
