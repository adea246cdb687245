package echoguard_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/slidegate/slidegate"
	"github.com/slidegate/slidegate/middleware/echoguard"
)

func ExampleMiddleware() {
	g, err := slidegate.New()
	if err != nil {
		panic(err)
	}
	_ = g.SetRules(slidegate.Rules{Flow: []slidegate.FlowRule{
		{Resource: "GET /hello/:name", Limit: 2}, // 2 per second
	}})
	e := echo.New()
	e.Use(middleware.Recover(), echoguard.Middleware(g))
	e.GET("/hello/:name", func(c echo.Context) error { return c.String(200, "hello, "+c.Param("name")) })

	for _, name := range []string{"ann", "bob", "cy"} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/hello/"+name, nil))
		fmt.Println(w.Code, w.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 false
	// 200 false
	// 429 true
}
