//go:build tools

package latchkey

import (
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"
)
