package fsm

import "github.com/perpd/perpd/fsm/growth"

// The leaderboards' recompute timer, from growth.LevelBoardsAfterFunding.
// It is registered from this file, whose name sorts after every
// apply_*.go, so it runs after the other domains' timers of the same entry
// (as the PoR timer does): a recompute and an hourly funding boundary fall
// in one entry every hour (the cadence divides the hour), and the boards
// then count the boundary's funding flows and the liquidations they made,
// which happened at or before computedTsMs. Below the level the recompute
// runs in apply_growth.go's timer, before the markets' (a review of
// 2026-11-27 on a devnet: the 21:00 boards left out the 21:00 funding of
// every open position until 21:15).
func init() {
	registerTimer(func(c *Ctx) {
		if c.St.Growth == nil || c.St.FeatureLevel < growth.LevelBoardsAfterFunding {
			return
		}
		c.St.Growth.OnClockBoards(c.growthEnv())
	})
}
