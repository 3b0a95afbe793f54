package plugin

import (
	"testing"
	"time"

	"github.com/nomad-device-zfs/nomad-device-zfs/model"
)

// TestReplicasAttribute: a class that keeps replicas publishes the task
// groups it keeps replicas of on its device group, and the fingerprint is
// sent again (the node re-registered) only when a group's first replica
// comes or its last goes: never for an increment, nor for a second
// replica of a group already published.
func TestReplicasAttribute(t *testing.T) {
	replica := func(source, group string, newest int) model.Replica {
		return model.Replica{Dataset: "tank/nomad/scratch/replica-" + source + "-scratch-1", Source: source, Slot: "scratch-1",
			Group: group, Newest: newest, NewestAt: time.Unix(int64(newest)*60, 0)}
	}
	steps := []struct {
		name     string
		replicas []model.Replica
		want     string
		changed  bool
	}{
		{name: "no replica yet", want: "", changed: true},
		{name: "the first replica of a group, its first receive under way", replicas: []model.Replica{replica("a1", "default/pg/db", 0)},
			want: "default/pg/db", changed: true},
		{name: "its first snapshot in", replicas: []model.Replica{replica("a1", "default/pg/db", 1)}, want: "default/pg/db"},
		{name: "an increment", replicas: []model.Replica{replica("a1", "default/pg/db", 2)}, want: "default/pg/db"},
		{name: "a second replica of the same group", replicas: []model.Replica{replica("a1", "default/pg/db", 2),
			replica("a2", "default/pg/db", 1)}, want: "default/pg/db"},
		{name: "the first replica of another group", replicas: []model.Replica{replica("a1", "default/pg/db", 3),
			replica("a2", "default/pg/db", 1), replica("b1", "prod/web/cache", 1)}, want: "default/pg/db,prod/web/cache", changed: true},
		{name: "one of the first group's two gone", replicas: []model.Replica{replica("a2", "default/pg/db", 2),
			replica("b1", "prod/web/cache", 1)}, want: "default/pg/db,prod/web/cache"},
		{name: "the first group's last gone", replicas: []model.Replica{replica("b1", "prod/web/cache", 2)},
			want: "prod/web/cache", changed: true},
	}
	var last [32]byte
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v := testView()
			v.Classes[0].Class.Replicate = model.Replicate{Copies: 1, Every: time.Minute}
			v.Classes[0].Replicas = st.replicas
			groups := deviceGroups(v)
			attr, ok := groups[0].Attributes[model.ReplicasAttrName]
			if !ok {
				t.Fatalf("no %s attribute: %v", model.ReplicasAttrName, groups[0].Attributes)
			}
			if got, _ := attr.GetString(); got != st.want {
				t.Errorf("attribute %q, want %q", got, st.want)
			}
			d, ok := digest(groups)
			if !ok {
				t.Fatal("no digest")
			}
			if changed := i == 0 || d != last; changed != st.changed {
				t.Errorf("fingerprint sent again: %v, want %v", changed, st.changed)
			}
			last = d
		})
	}
	t.Run("a class that keeps no replicas publishes none", func(t *testing.T) {
		if _, ok := deviceGroups(testView())[0].Attributes[model.ReplicasAttrName]; ok {
			t.Error("the attribute is published")
		}
	})
}
