package ginguard_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/gin-gonic/gin"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/ginguard"
)

func ExampleMiddleware() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /hello/:name", Limit: 2}, // 2 per second
	}})
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), ginguard.Middleware(g))
	r.GET("/hello/:name", func(c *gin.Context) { c.String(200, "hello, %s", c.Param("name")) })

	for _, name := range []string{"ann", "bob", "cy"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/hello/"+name, nil))
		fmt.Println(w.Code, w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 false
	// 200 false
	// 429 true
}
