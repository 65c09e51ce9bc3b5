-- empty: nothing; the floor of an EVALSHA (budget_test.go)
return 1
